//! Property tests of the masking service: arbitrary input never breaks it,
//! masking twice changes nothing, planted secrets never survive whatever
//! text surrounds them, prose stays as written, and 1 MiB inputs complete.
//!
//! `PROPTEST_CASES=2000 cargo test -p tarsy-masking --test properties`
//! explores more than the 64 cases CI runs.

use std::time::Instant;

use proptest::prelude::*;
use proptest::sample::select;
use tarsy_masking::builtin::PATTERNS;
use tarsy_masking::{AlertMaskingConfig, KubernetesSecretMasker, MaskingConfig, MaskingService};

const WITHHELD: &str = "[MASKED_TOOL_RESULT";

/// 64 cases unless `PROPTEST_CASES` asks for more; failures are not
/// written into the source tree (the shrunk input is printed).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn server(groups: &[&str], patterns: &[&str]) -> MaskingConfig {
    MaskingConfig {
        enabled: true,
        pattern_groups: groups.iter().map(|s| s.to_string()).collect(),
        patterns: patterns.iter().map(|s| s.to_string()).collect(),
        custom_patterns: vec![],
    }
}

/// Servers: `default` is what an MCP server without a `dataMasking` block
/// gets (tarsy_config::DEFAULT_MASKING_GROUPS), `all` every masker, and
/// `regex` every regex pattern without the structural masker (so only a
/// panic could make it withhold a result), `security` the alert group.
fn service() -> &'static MaskingService {
    static SERVICE: std::sync::OnceLock<MaskingService> = std::sync::OnceLock::new();
    SERVICE.get_or_init(|| {
        let every_regex: Vec<&str> = PATTERNS.iter().map(|p| p.name).collect();
        MaskingService::new(
            [
                (
                    "default".to_string(),
                    server(&["kubernetes", "security"], &[]),
                ),
                ("all".to_string(), server(&["all"], &[])),
                ("regex".to_string(), server(&[], &every_regex)),
                ("security".to_string(), server(&["security"], &[])),
            ],
            AlertMaskingConfig::default(),
        )
        .unwrap()
    })
}

/// The ways a text reaches the LLM or the database: tool results under each
/// server, and alert data / chat questions.
fn mask_all_ways(text: &str) -> Vec<(&'static str, String)> {
    let svc = service();
    vec![
        ("default", svc.mask_tool_result("default", text)),
        ("all", svc.mask_tool_result("all", text)),
        ("regex", svc.mask_tool_result("regex", text)),
        ("alert", svc.mask_alert_data(text)),
    ]
}

/// Any text: printable Unicode plus the control characters tools emit.
fn any_text() -> impl Strategy<Value = String> {
    "(\\PC|\\n|\\t|\\r|\\x00|\\x1b){0,300}"
}

/// Text assembled from the pieces the maskers look for (manifest keys,
/// JSON braces, quotes, indentation, PEM armour, base64), so that the
/// structural masker's parsers and fallbacks and the `key: value` patterns
/// see near-misses rather than noise.
fn manifest_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        select(vec![
            "apiVersion: v1\n",
            "kind: Secret\n",
            "kind: ConfigMap\n",
            "kind: SecretList\n",
            "kind: List\n",
            "items:\n",
            "metadata:\n",
            "  name: x\n",
            "data:\n",
            "stringData:\n",
            "data: ",
            "- ",
            "  ",
            "    ",
            "\t",
            "\n",
            "---\n",
            "password: ",
            "token=",
            "secret: ",
            "api_key: ",
            "Bearer ",
            "https://u:",
            "@host/",
            "{",
            "}",
            "[",
            "]",
            ",",
            ": ",
            "\"",
            "'",
            "\\\"",
            "\"data\": {",
            "\"kind\": \"Secret\"",
            "\\\"data\\\":{",
            "\\\"kind\\\":\\\"Secret\\\"",
            "|\n",
            ">\n",
            "# ",
            " bytes",
            "-----BEGIN RSA PRIVATE KEY-----\n",
            "-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN CERTIFICATE-----\n",
            "-----END CERTIFICATE-----\n",
            "LS0tLS1CRUdJTi",
            "[MASKED_TOKEN]",
            "eyJhbGciOi.eyJzdWIiOi.",
        ])
        .prop_map(str::to_string),
        "[A-Za-z0-9+/]{1,48}={0,2}",
        "[a-z_]{1,10}",
        "\\PC{1,3}",
    ];
    prop::collection::vec(piece, 0..60).prop_map(|p| p.concat())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![any_text(), manifest_like()]
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary input never panics a masker: the structural masker returns,
    /// the regex-only server never withholds (only a panic could make it),
    /// and the default server withholds exactly when the structural masker
    /// reports a failure — never for any other reason.
    #[test]
    fn arbitrary_input_never_breaks_masking(text in text()) {
        let structural = KubernetesSecretMasker::new().unwrap().mask(&text).map(|_| ());
        let svc = service();
        let regex = svc.mask_tool_result("regex", &text);
        prop_assert!(!regex.starts_with(WITHHELD), "regex patterns failed on {text:?}");
        let default = svc.mask_tool_result("default", &text);
        prop_assert_eq!(
            default.starts_with(WITHHELD),
            structural.is_err(),
            "withheld without a structural failure (or the reverse): {:?} → {:?}",
            text,
            default
        );
        // Alert masking is its group's masking, except that a structural
        // failure skips the structural masker instead of withholding.
        let alert = svc.mask_alert_data(&text);
        let security = svc.mask_tool_result("security", &text);
        prop_assert_eq!(security.starts_with(WITHHELD), structural.is_err());
        if structural.is_ok() {
            prop_assert_eq!(alert, security, "alert masking differs from its group's");
        }
    }

    /// Masking masked output changes nothing: markers are never re-masked
    /// and masking never creates a new match.
    #[test]
    fn masking_is_idempotent(text in text()) {
        for (way, once) in mask_all_ways(&text) {
            if once.starts_with(WITHHELD) {
                continue;
            }
            let twice = match way {
                "alert" => service().mask_alert_data(&once),
                server => service().mask_tool_result(server, &once),
            };
            prop_assert_eq!(&twice, &once, "{} masking is not idempotent on {:?}", way, text);
        }
    }

    /// A secret planted anywhere in arbitrary text, set apart by whitespace
    /// or punctuation, never survives the default masking of tool results,
    /// nor that of alert data and chat questions.
    #[test]
    fn planted_secrets_are_always_masked(
        planted in planted(),
        prefix in "(\\PC|\\n){0,80}",
        suffix in "(\\PC|\\n){0,80}",
        sep in select(vec![" ", "\n", "\t", ", ", "; ", " (", ") ", "\n\n", " | ", " -> "]),
    ) {
        // Manifests need lines of their own.
        let (before, after) = if planted.own_lines { ("\n\n", "\n") } else { (sep, sep) };
        let text = format!("{prefix}{before}{}{after}{suffix}", planted.text);
        let ways = [
            ("default", service().mask_tool_result("default", &text)),
            ("all", service().mask_tool_result("all", &text)),
            ("alert", service().mask_alert_data(&text)),
        ];
        for (way, out) in ways {
            for s in &planted.sensitive {
                prop_assert!(
                    !out.contains(s.as_str()),
                    "{} ({}) leaked {:?}:\n{}",
                    planted.kind,
                    way,
                    s,
                    out
                );
            }
            prop_assert!(out.contains("[MASKED_"), "{} ({}): no marker in {}", planted.kind, way, out);
        }
    }

    /// Prose about credentials — words, numbers, punctuation, no
    /// `key: value` — is never changed: an operator reading the timeline
    /// sees the error messages as the tools wrote them. (Not "bearer": a
    /// long word after it is masked on purpose, as a token written without
    /// its header cannot be told from a word.)
    #[test]
    fn prose_about_credentials_is_kept(words in prop::collection::vec(prose_word(), 1..40)) {
        let text = words.join(" ");
        for (way, out) in mask_all_ways(&text) {
            if way == "all" {
                continue; // `all` includes the generic base64 sweeps
            }
            prop_assert_eq!(&out, &text, "{} masking changed prose", way);
        }
    }
}

fn prose_word() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "secret",
            "secrets",
            "password",
            "passwords",
            "token",
            "tokens",
            "key",
            "api",
            "credential",
            "connection",
            "refused",
            "the",
            "was",
            "rotated",
            "expired",
            "invalid",
            "for",
            "user",
            "pod",
            "checkout",
            "failed",
            "to",
            "read",
            "mount",
            "volume",
            "authentication",
            "authorization",
            "header",
            "missing",
            "(retrying)",
            "in",
            "5s.",
            "OOMKilled",
            "sha256",
            "base64",
            "private",
            "public",
            "certificate",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,6}",
    ]
}

/// A secret in one of the shapes the issue lists, with random content.
#[derive(Debug, Clone)]
struct Planted {
    kind: &'static str,
    text: String,
    /// Substrings that must not survive masking.
    sensitive: Vec<String>,
    /// A manifest: it goes on lines of its own.
    own_lines: bool,
}

fn simple(kind: &'static str, text: String, sensitive: Vec<String>) -> Planted {
    Planted {
        kind,
        text,
        sensitive,
        own_lines: false,
    }
}

/// `key=value`, `key: value`, `"key": "value"` or `key='value'`.
fn key_value(
    kind: &'static str,
    keys: Vec<&'static str>,
    value: impl Strategy<Value = String>,
) -> impl Strategy<Value = Planted> {
    (select(keys), 0..4usize, value).prop_map(move |(k, form, v)| {
        let text = match form {
            0 => format!("{k}={v}"),
            1 => format!("{k}: {v}"),
            2 => format!("\"{k}\": \"{v}\""),
            _ => format!("{k}='{v}'"),
        };
        simple(kind, text, vec![v])
    })
}

/// A password-like value: starts with a letter, no quotes, separators or
/// brackets.
fn value() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9_.!#%*+-]{7,23}"
}

fn planted() -> impl Strategy<Value = Planted> {
    prop_oneof![
        key_value(
            "password",
            vec!["password", "DB_PASSWORD", "passwd", "redis.passphrase"],
            value()
        ),
        key_value(
            "token field",
            vec!["token", "access_token", "X-Auth-Token"],
            value()
        ),
        key_value("api key field", vec!["api_key", "apiKey", "X-API-Key"], value()),
        key_value(
            "secret field",
            vec!["client_secret", "secret_key", "signing_key"],
            value()
        ),
        key_value(
            "aws secret key",
            vec!["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "SecretAccessKey"],
            "[A-Za-z0-9/+]{40}"
        ),
        "(AKIA|ASIA)[A-Z0-9]{16}".prop_map(|k| simple("aws access key id", k.clone(), vec![k])),
        "gh[pousr]_[A-Za-z0-9]{36}".prop_map(|k| simple("github token", k.clone(), vec![k])),
        "github_pat_[A-Za-z0-9_]{82}".prop_map(|k| simple("github pat", k.clone(), vec![k])),
        "glpat-[A-Za-z0-9_-]{20}".prop_map(|k| simple("gitlab token", k.clone(), vec![k])),
        "xox[bp]-[0-9]{10,12}-[0-9]{10,12}-[A-Za-z0-9]{24}"
            .prop_map(|k| simple("slack token", k.clone(), vec![k])),
        "eyJ[A-Za-z0-9_-]{10,40}\\.eyJ[A-Za-z0-9_-]{10,80}\\.[A-Za-z0-9_-]{20,43}"
            .prop_map(|k| simple("jwt", k.clone(), vec![k])),
        "[A-Za-z0-9._~+/-]{20,60}".prop_map(|t| simple(
            "bearer header",
            format!("Authorization: Bearer {t}"),
            vec![t]
        )),
        (
            select(vec!["https", "postgres", "redis", "amqp"]),
            "[a-z]{3,8}",
            "[A-Za-z0-9!*_~-]{8,20}",
            "[a-z]{3,10}",
        )
            .prop_map(|(scheme, user, pw, host)| simple(
                "basic-auth url",
                format!("{scheme}://{user}:{pw}@{host}.example.com:5432/db"),
                vec![pw]
            )),
        (
            select(vec![
                "RSA PRIVATE KEY",
                "PRIVATE KEY",
                "EC PRIVATE KEY",
                "OPENSSH PRIVATE KEY",
                "ENCRYPTED PRIVATE KEY"
            ]),
            prop::collection::vec("[A-Za-z0-9+/]{64}", 2..6),
            "[A-Za-z0-9+/]{4,60}",
        )
            .prop_map(|(label, lines, last)| {
                let body = format!("{}\n{last}=", lines.join("\n"));
                let mut sensitive = lines;
                sensitive.push(last);
                Planted {
                    kind: "pem private key",
                    text: format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----"),
                    sensitive,
                    own_lines: false,
                }
            }),
        ("[a-z]{5,12}", "[A-Za-z0-9+/]{86}").prop_map(|(account, key)| simple(
            "azure storage connection string",
            format!(
                "DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key}==;EndpointSuffix=core.windows.net"
            ),
            vec![key]
        )),
        ("[a-z]{5,12}", "[A-Za-z0-9+/]{43}").prop_map(|(ns, key)| simple(
            "azure service bus connection string",
            format!(
                "Endpoint=sb://{ns}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}="
            ),
            vec![key]
        )),
        ("[0-9a-f]{40}", prop::collection::vec("[A-Za-z0-9+/]{64}", 2..5)).prop_map(
            |(id, lines)| {
                let text = format!(
                    "{{\"type\": \"service_account\", \"project_id\": \"shop-prod\", \"private_key_id\": \"{id}\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\", \"client_email\": \"ci@shop-prod.iam.gserviceaccount.com\"}}",
                    lines.join("\\n")
                );
                let mut sensitive = lines;
                sensitive.push(id);
                simple("gcp service account json", text, sensitive)
            }
        ),
        kubernetes_secret(),
    ]
}

/// A Secret manifest (YAML or JSON, `data` or `stringData`) whose keys and
/// values have no telltale names: only the structural masker finds them.
fn kubernetes_secret() -> impl Strategy<Value = Planted> {
    (
        "[a-z][a-z0-9-]{2,12}",
        prop::collection::btree_map("[a-z][a-z0-9_.]{2,10}", "[A-Za-z0-9+/]{16,48}", 1..4),
        0..3usize,
    )
        .prop_map(|(name, entries, form)| {
            let sensitive: Vec<String> = entries.values().cloned().collect();
            let text = match form {
                0 => {
                    let data: String = entries
                        .iter()
                        .map(|(k, v)| format!("  {k}: {v}=\n"))
                        .collect();
                    format!(
                        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: shop\ntype: Opaque\ndata:\n{data}"
                    )
                }
                1 => {
                    let data: String = entries
                        .iter()
                        .map(|(k, v)| format!("  {k}: plain-{v}\n"))
                        .collect();
                    format!(
                        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n{data}type: Opaque\n"
                    )
                }
                _ => {
                    let data: Vec<String> = entries
                        .iter()
                        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
                        .collect();
                    format!(
                        "{{\"apiVersion\":\"v1\",\"data\":{{{}}},\"kind\":\"Secret\",\"metadata\":{{\"name\":\"{name}\"}},\"type\":\"Opaque\"}}",
                        data.join(",")
                    )
                }
            };
            Planted {
                kind: "kubernetes secret",
                text,
                sensitive,
                own_lines: true,
            }
        })
}

// ------------------------------------------------------------ 1 MiB inputs

const MIB: usize = 1024 * 1024;

/// Masks `doc` through the default tool-result masking, printing how long
/// it took (benchmarks measure speed; this only proves it finishes).
fn mask_timed(label: &str, server: &str, doc: &str) -> String {
    let start = Instant::now();
    let out = service().mask_tool_result(server, doc);
    eprintln!(
        "{label}: {} bytes masked by '{server}' in {:?}",
        doc.len(),
        start.elapsed()
    );
    assert!(!out.starts_with(WITHHELD), "{label}: masking failed");
    out
}

/// 1 MiB of application logs with a credential every 40 lines: every one
/// is masked and the ordinary lines are kept.
#[test]
fn one_mib_of_logs_with_secrets() {
    let mut doc = String::with_capacity(MIB + 4096);
    let mut planted = Vec::new();
    let mut i = 0u32;
    while doc.len() < MIB {
        i += 1;
        if i.is_multiple_of(40) {
            let pw = format!("Pw{i:06}xQ7zR");
            let key = format!("AKIA{i:016}");
            let ghp = format!("ghp_{i:06}abcdefghijklmnopqrstuvwxyz0123");
            doc.push_str(&format!(
                "2025-06-02T08:14:{:02}Z ERROR db connect password={pw} key={key} {ghp}\n",
                i % 60
            ));
            planted.extend([pw, key, ghp]);
        } else {
            doc.push_str(&format!(
                "2025-06-02T08:14:{:02}Z INFO request {i} served in {}ms (connection reused)\n",
                i % 60,
                i % 997
            ));
        }
    }
    let out = mask_timed("logs", "default", &doc);
    let leaked: Vec<_> = planted
        .iter()
        .filter(|s| out.contains(s.as_str()))
        .collect();
    assert!(
        leaked.is_empty(),
        "{} of {} leaked: {:?}",
        leaked.len(),
        planted.len(),
        &leaked[..leaked.len().min(5)]
    );
    assert!(out.contains("INFO request 39 served in 39ms (connection reused)"));
}

/// A 1 MiB `kubectl get secrets,configmaps -o yaml` (one valid YAML
/// document: the parsing path): Secret values go, ConfigMap values stay.
#[test]
fn one_mib_secret_list_yaml() {
    let mut doc = String::from("apiVersion: v1\nitems:\n");
    let mut i = 0u32;
    while doc.len() < MIB {
        doc.push_str(&format!(
            "- apiVersion: v1\n  data:\n    conn: c2VjcmV0LXZhbHVlLTA{i:08}\n  kind: Secret\n  metadata:\n    name: app-{i}\n  type: Opaque\n\
             - apiVersion: v1\n  data:\n    endpoint: https://svc-{i}.example.com\n  kind: ConfigMap\n  metadata:\n    name: cfg-{i}\n"
        ));
        i += 1;
    }
    doc.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    let out = mask_timed("secret list", "default", &doc);
    for j in [0, i / 2, i - 1] {
        assert!(
            !out.contains(&format!("c2VjcmV0LXZhbHVlLTA{j:08}")),
            "secret {j} leaked"
        );
        assert!(
            out.contains(&format!("https://svc-{j}.example.com")),
            "configmap {j} masked"
        );
    }
    assert_eq!(out.matches("[MASKED_SECRET_DATA]").count(), i as usize);
}

/// Adversarial 1 MiB inputs for the regex engine and the line scanner:
/// one line with no newline, PEM headers that never end, thousands of
/// `kind: Secret` lines in text that does not parse. Each completes and
/// leaves no secret behind.
#[test]
fn one_mib_adversarial_inputs() {
    let line = "Ab1+".repeat(MIB / 4);
    let out = mask_timed("one base64 line", "all", &line);
    assert!(
        !out.contains("Ab1+Ab1+Ab1+Ab1+Ab1+"),
        "a 1 MiB base64 run survived `all`"
    );

    let headers =
        "-----BEGIN RSA PRIVATE KEY-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n".repeat(MIB / 66);
    let out = mask_timed("unterminated PEM keys", "default", &headers);
    assert!(!out.contains("QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"));

    let certs = "-----BEGIN CERTIFICATE-----\nTUlJQ0NFUlQ=\n".repeat(MIB / 42);
    let out = mask_timed("unterminated certificates", "all", &certs);
    assert!(
        out.contains("TUlJQ0NFUlQ="),
        "a body without END is not a certificate"
    );

    let kv = "password=hunter2x password: ".repeat(MIB / 28);
    let out = mask_timed("key-value run", "default", &kv);
    assert!(!out.contains("hunter2x"));

    let mut broken = String::from("\tnot: [yaml\n");
    let mut k = 0;
    while broken.len() < MIB {
        broken.push_str(&format!("kind: Secret\ndata:\n  k{k}: dmFsdWUt{k:06}\n"));
        k += 1;
    }
    let out = mask_timed("unparseable secrets", "default", &broken);
    assert!(
        !out.contains("dmFsdWUt"),
        "a Secret value survived the line scanner"
    );
}
