//! The example resources parse into the Rust types and pass the CRDs' schema
//! and CEL rules; the negative examples are rejected with the expected error;
//! every CEL rule is exercised by at least one negative example.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tarsy_config::schema::{schemas, validate_object};
use tarsy_crds::{Agent, AgentExecution, Alert, Chain, LLMProvider, MCPServer};

const EXPECT: &str = "test.tarsy.dev/expect";
const UPDATE_OF: &str = "test.tarsy.dev/update-of";
const FILL: &str = "test.tarsy.dev/fill-data-bytes";
const BASE: &str = "test.tarsy.dev/base";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            serde_json::to_value(v).unwrap()
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn annotation<'a>(doc: &'a Value, key: &str) -> Option<&'a str> {
    doc.pointer("/metadata/annotations")?.get(key)?.as_str()
}

fn name(doc: &Value) -> &str {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap()
}

/// Parses a document into its Rust type and back, proving the types cover it.
fn round_trip(doc: &Value) -> Value {
    fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Value {
        let typed: T = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", name(doc)));
        serde_json::to_value(typed).unwrap()
    }
    match doc["kind"].as_str().unwrap() {
        "Alert" => rt::<Alert>(doc),
        "Chain" => rt::<Chain>(doc),
        "AgentExecution" => rt::<AgentExecution>(doc),
        "Agent" => rt::<Agent>(doc),
        "MCPServer" => rt::<MCPServer>(doc),
        "LLMProvider" => rt::<LLMProvider>(doc),
        other => panic!("unexpected kind {other}"),
    }
}

/// Finds `FILE/NAME` among the examples, or `invalid/FILE/NAME` among the negative ones.
fn find_doc(reference: &str) -> Value {
    let (dir, rest) = match reference.strip_prefix("invalid/") {
        Some(rest) => (crate_dir().join("tests/invalid"), rest),
        None => (crate_dir().join("examples"), reference),
    };
    let (file, wanted) = rest.split_once('/').unwrap();
    docs(&dir.join(file))
        .into_iter()
        .find(|d| name(d) == wanted)
        .unwrap_or_else(|| panic!("no document {reference}"))
}

#[test]
fn examples_parse_and_validate() {
    let mut kinds = BTreeSet::new();
    for file in yaml_files(&crate_dir().join("examples")) {
        for doc in docs(&file) {
            let label = format!("{}: {}", file.display(), name(&doc));
            kinds.insert(doc["kind"].as_str().unwrap().to_string());
            if let Err(v) = validate_object(&doc, None) {
                panic!("{label} is rejected: {v:?}");
            }
            // What the typed value serializes to is just as valid (the operator writes it).
            let again = round_trip(&doc);
            if let Err(v) = validate_object(&again, None) {
                panic!("{label} re-serialized is rejected: {v:?}");
            }
            // Updating an object to itself passes every transition rule.
            if let Err(v) = validate_object(&doc, Some(&doc)) {
                panic!("{label} as a no-op update is rejected: {v:?}");
            }
        }
    }
    let expected: BTreeSet<String> = schemas().keys().cloned().collect();
    assert_eq!(kinds, expected, "examples must cover every kind");
}

fn negative_docs() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for file in yaml_files(&crate_dir().join("tests/invalid")) {
        for doc in docs(&file) {
            let label = format!("{}: {}", file.display(), name(&doc));
            out.push((label, doc));
        }
    }
    out
}

#[test]
fn negative_examples_are_rejected_with_their_error() {
    let mut checked = 0;
    for (label, mut doc) in negative_docs() {
        if annotation(&doc, BASE).is_some() {
            validate_object(&doc, None).unwrap_or_else(|v| panic!("{label} base: {v:?}"));
            continue;
        }
        let expect = annotation(&doc, EXPECT)
            .unwrap_or_else(|| panic!("{label} has no {EXPECT} annotation"))
            .to_string();
        if let Some(bytes) = annotation(&doc, FILL) {
            let n: usize = bytes.parse().unwrap();
            doc["spec"]["data"] = Value::String("x".repeat(n));
        }
        let old = annotation(&doc, UPDATE_OF).map(find_doc);
        if let Some(old) = &old {
            // The old version is valid and the change is the only problem.
            validate_object(old, None).unwrap();
            assert!(
                validate_object(&doc, None).is_ok(),
                "{label}: as a creation it must be valid, so the update rule is what rejects it"
            );
        }
        let violations = match validate_object(&doc, old.as_ref()) {
            Ok(()) => panic!("{label} was accepted; expected {expect:?}"),
            Err(v) => v,
        };
        let rendered: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert!(
            rendered.iter().any(|r| r.contains(&expect)),
            "{label}: expected {expect:?}, got {rendered:?}"
        );
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} negative examples");
}

/// Every rule a CRD carries, as (kind, rule, message).
fn all_rules() -> Vec<(String, String, String)> {
    fn walk(kind: &str, schema: &Value, out: &mut Vec<(String, String, String)>) {
        if let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            for r in rules {
                out.push((
                    kind.to_string(),
                    r["rule"].as_str().unwrap().to_string(),
                    r["message"].as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        for key in ["properties", "additionalProperties", "items"] {
            match schema.get(key) {
                Some(Value::Object(m)) if key == "properties" => {
                    m.values().for_each(|s| walk(kind, s, out))
                }
                Some(s @ Value::Object(_)) => walk(kind, s, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for (kind, schema) in &schemas() {
        walk(kind, schema, &mut out);
    }
    out
}

#[test]
fn every_cel_rule_has_a_negative_example() {
    let expectations: Vec<String> = negative_docs()
        .iter()
        .filter_map(|(_, d)| annotation(d, EXPECT).map(str::to_string))
        .collect();
    let rules = all_rules();
    assert!(rules.len() >= 35, "only {} rules", rules.len());
    for (kind, rule, message) in rules {
        assert!(!message.is_empty(), "{kind}: rule {rule:?} has no message");
        assert!(
            expectations
                .iter()
                .any(|e| message.contains(e.as_str()) || e.contains(&message)),
            "{kind}: no negative example exercises rule {rule:?} ({message:?})"
        );
    }
}

#[test]
fn every_cel_rule_compiles_within_the_cost_budget() {
    use kube_cel::{ScopeContext, WarningKind, analyze_rule, compile_schema};
    fn walk(kind: &str, schema: &Value, problems: &mut Vec<String>) {
        if let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            let compiled = compile_schema(schema);
            for e in compiled.compilation_errors() {
                problems.push(format!("{kind}: {e}"));
            }
            for r in rules {
                let rule = r["rule"].as_str().unwrap();
                // The scope check does not know comprehension variables
                // (`self.all(k, ...)`), so only cost findings count.
                for w in analyze_rule(rule, &compiled, ScopeContext::CrdValidation)
                    .into_iter()
                    .filter(|w| w.kind != WarningKind::WrongScope)
                {
                    problems.push(format!("{kind}: {rule}: {}", w.message));
                }
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            props.values().for_each(|s| walk(kind, s, problems));
        }
        for key in ["additionalProperties", "items"] {
            if let Some(s @ Value::Object(_)) = schema.get(key) {
                walk(kind, s, problems);
            }
        }
    }
    let mut problems = Vec::new();
    for (kind, schema) in &schemas() {
        walk(kind, schema, &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn alert_data_limit_counts_bytes() {
    let mut doc = find_doc("alerts.yaml/web-0-crashloop");
    // 1 MiB of ASCII is accepted, one byte more is not.
    doc["spec"]["data"] = Value::String("x".repeat(tarsy_crds::MAX_ALERT_DATA_BYTES));
    validate_object(&doc, None).unwrap();
    doc["spec"]["data"] = Value::String("x".repeat(tarsy_crds::MAX_ALERT_DATA_BYTES + 1));
    assert!(validate_object(&doc, None).is_err());
    // Multi-byte characters count by bytes: one two-byte character more than
    // half the limit exceeds it.
    doc["spec"]["data"] = Value::String("é".repeat(tarsy_crds::MAX_ALERT_DATA_BYTES / 2 + 1));
    assert!(validate_object(&doc, None).is_err());
}
