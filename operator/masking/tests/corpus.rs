//! The fixture corpus: realistic tool outputs with planted secrets.
//!
//! Each `tests/fixtures/NAME.expect.json` names an input file, the masking
//! configuration to use, the secret values planted in it (none may survive)
//! and non-secret text that must survive (so over-masking fails too).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectation {
    input: String,
    description: String,
    masking: MaskingConfig,
    secrets: Vec<String>,
    #[serde(default)]
    keep: Vec<String>,
    /// The output must equal the input byte for byte.
    #[serde(default)]
    unchanged: bool,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn load() -> Vec<(String, Expectation, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".expect.json") {
            continue;
        }
        let exp: Expectation = serde_json::from_str(&fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let input = fs::read_to_string(fixtures_dir().join(&exp.input))
            .unwrap_or_else(|e| panic!("{name}: input {}: {e}", exp.input));
        out.push((name, exp, input));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 20,
        "corpus went missing: {} fixtures",
        out.len()
    );
    out
}

fn service(masking: &MaskingConfig) -> MaskingService {
    MaskingService::new(
        [("server".to_string(), masking.clone())],
        AlertMaskingConfig::default(),
    )
    .unwrap()
}

#[test]
fn every_fixture_file_has_an_expectation() {
    let referenced: Vec<String> = load().into_iter().map(|(_, e, _)| e.input).collect();
    for entry in fs::read_dir(fixtures_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".expect.json") {
            assert!(
                referenced.contains(&name),
                "fixture {name} has no expectation"
            );
        }
    }
}

/// The configured masking leaks none of the planted secrets and keeps every
/// planted non-secret.
#[test]
fn corpus_leaks_nothing_and_keeps_context() {
    let mut failures = Vec::new();
    let mut secrets_checked = 0;
    for (name, exp, input) in load() {
        assert!(!exp.description.is_empty(), "{name}: describe the fixture");
        let out = service(&exp.masking).mask_tool_result("server", &input);
        assert!(
            !out.starts_with("[MASKED_TOOL_RESULT"),
            "{name}: masking failed closed instead of masking:\n{out}"
        );
        for secret in &exp.secrets {
            // A typo in the expectation must not make the check vacuous.
            assert!(
                input.contains(secret.as_str()),
                "{name}: secret not planted: {secret}"
            );
            secrets_checked += 1;
            if out.contains(secret.as_str()) {
                failures.push(format!("{name}: LEAKED {secret}"));
            }
        }
        for keep in &exp.keep {
            assert!(
                input.contains(keep.as_str()),
                "{name}: keep text not planted: {keep}"
            );
            if !out.contains(keep.as_str()) {
                failures.push(format!("{name}: over-masked {keep:?}"));
            }
        }
        if exp.unchanged && out != input {
            failures.push(format!("{name}: expected unchanged, got:\n{out}"));
        }
        if !exp.secrets.is_empty() && !out.contains("[MASKED_") {
            failures.push(format!("{name}: no [MASKED_X] marker in output"));
        }
    }
    assert!(
        secrets_checked >= 80,
        "only {secrets_checked} secrets checked"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// With every pattern on, still nothing leaks (patterns must not undo each
/// other's work or break the structural masker).
#[test]
fn corpus_leaks_nothing_with_group_all() {
    let svc = service(&MaskingConfig {
        pattern_groups: vec!["all".into()],
        ..MaskingConfig::default()
    });
    let mut failures = Vec::new();
    for (name, exp, input) in load() {
        let out = svc.mask_tool_result("server", &input);
        for secret in &exp.secrets {
            if out.contains(secret.as_str()) {
                failures.push(format!("{name}: LEAKED {secret}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// All fixtures glued into one tool result (as a tool that dumps several
/// things at once would): it no longer parses as one document, so the
/// fallbacks and the regex layer must still catch everything.
#[test]
fn concatenated_corpus_leaks_nothing() {
    let svc = service(&MaskingConfig {
        pattern_groups: vec!["all".into()],
        ..MaskingConfig::default()
    });
    let corpus = load();
    let mut all = String::new();
    for (_, _, input) in &corpus {
        all.push_str(input);
        all.push_str("\n\nnext output:\n");
    }
    let out = svc.mask_tool_result("server", &all);
    let leaks: Vec<_> = corpus
        .iter()
        .flat_map(|(name, exp, _)| exp.secrets.iter().map(move |s| (name, s)))
        .filter(|(_, s)| out.contains(s.as_str()))
        .map(|(name, s)| format!("{name}: LEAKED {s}"))
        .collect();
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

/// Alert payloads (masked with the default `security` group) containing
/// corpus material lose their credentials but keep their shape.
#[test]
fn alert_data_masks_credentials() {
    let svc = MaskingService::new([], AlertMaskingConfig::default()).unwrap();
    for (name, exp, input) in load() {
        if ![
            "env_dump.txt.expect.json",
            "pem_material.txt.expect.json",
            "access_logs.log.expect.json",
        ]
        .contains(&name.as_str())
        {
            continue;
        }
        let alert = serde_json::json!({"alertname": "PaymentsDown", "evidence": input}).to_string();
        let out = svc.mask_alert_data(&alert);
        assert!(out.contains("PaymentsDown"), "{name}");
        for secret in &exp.secrets {
            assert!(
                !out.contains(secret.as_str()),
                "{name}: alert leaked {secret}"
            );
        }
    }
}

/// A Secret pasted into alert data or a chat question (both masked with the
/// default `security` group) loses its values, and the text around it stays
/// exactly as typed (the masker does not write the document out again).
#[test]
fn alert_data_masks_pasted_secret_manifests() {
    let svc = MaskingService::new([], AlertMaskingConfig::default()).unwrap();
    let question = "We rotated it. Here is the new Secret:\napiVersion: v1\nkind: Secret\n\
                    metadata:\n  name: payments-db\ndata:\n  rotated: Q2hhdFNlY3JldFZhbHVlLTc3MjE=\n\
                    So is the connection refused error related to secretName: payments-db?";
    let out = svc.mask_alert_data(question);
    assert_eq!(
        out,
        question.replace("Q2hhdFNlY3JldFZhbHVlLTc3MjE=", "'[MASKED_SECRET_DATA]'")
    );
    assert!(out.contains("rotated: '[MASKED_SECRET_DATA]'"), "{out}");
    assert!(
        out.contains("We rotated it. Here is the new Secret:"),
        "{out}"
    );
    assert!(
        out.contains("So is the connection refused error related to secretName: payments-db?"),
        "{out}"
    );

    let json = r#"{"alert":"x","kind":"Secret","data":{"k":"dmFsdWUtaW4tYWxlcnQ="}}"#;
    let out = svc.mask_alert_data(json);
    assert!(!out.contains("dmFsdWUtaW4tYWxlcnQ="), "{out}");
}
