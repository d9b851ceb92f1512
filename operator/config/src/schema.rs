//! Validation of a document against its kind's schema, so that local mode
//! (and tests) reject what the API server would reject, with a field path.
//!
//! The schemas are the committed CRD manifests (`kubernetes/crds/manifests`, generated
//! from [`crate::model`]): what the API server checks is exactly what is
//! checked here. Two passes: [`check_structure`] applies the OpenAPI keywords
//! the schema uses (types, required, unknown fields, enum, bounds, list
//! uniqueness); [`check_cel`] evaluates the `x-kubernetes-validations` rules
//! with the Kubernetes CEL library (`kube-cel`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::Value;

/// One way an object breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Field path, e.g. `spec.stages[2].agents[0].name` (empty for the object itself).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// One kind's schema, as JSON, and its CEL rules compiled.
struct KindSchema {
    schema: Value,
    rules: kube_cel::CompiledSchema,
}

/// The schema of each kind's committed CRD manifest, as JSON (build.rs).
/// Validation reads the manifests rather than generating schemas from the
/// types: the manifests are what the API server enforces, a test keeps them
/// equal to what the types generate, and parsing is several times cheaper
/// than generating (this is on the start-up path of `tarsy investigate`).
macro_rules! manifest_schema {
    ($file:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/", $file, ".json"))
    };
}

/// The TARSy kinds and their schemas.
const KINDS: [(&str, &str); 6] = [
    ("Alert", manifest_schema!("tarsy.dev_alerts")),
    ("Chain", manifest_schema!("tarsy.dev_chains")),
    (
        "AgentExecution",
        manifest_schema!("tarsy.dev_agentexecutions"),
    ),
    ("Agent", manifest_schema!("tarsy.dev_agents")),
    ("MCPServer", manifest_schema!("tarsy.dev_mcpservers")),
    ("LLMProvider", manifest_schema!("tarsy.dev_llmproviders")),
];

/// Each kind's schema, built on first use of that kind: parsing a CRD
/// schema and compiling its CEL rules takes milliseconds, and a process
/// usually validates a few kinds only (start-up of `tarsy investigate`).
fn kind_schema(kind: &str) -> Option<&'static KindSchema> {
    static CACHE: [OnceLock<Option<KindSchema>>; KINDS.len()] =
        [const { OnceLock::new() }; KINDS.len()];
    let index = KINDS.iter().position(|(name, _)| *name == kind)?;
    CACHE[index]
        .get_or_init(|| {
            let schema: Value = serde_json::from_str(KINDS[index].1).ok()?;
            let rules = kube_cel::compile_schema(&schema);
            Some(KindSchema { schema, rules })
        })
        .as_ref()
}

/// Starts building the schemas of `kinds` on a background thread, in the
/// order given, so that validation on the caller's thread (which takes the
/// kinds in its own order) finds them ready or being built: a kind is built
/// once, by whichever thread asks first.
pub fn precompile(kinds: &'static [&'static str]) {
    // Only a head start: when no thread can be spawned, validation builds
    // the schemas on first use anyway.
    let _ = std::thread::Builder::new()
        .name("crd-schemas".into())
        .spawn(move || {
            for kind in kinds {
                let _ = kind_schema(kind);
            }
        });
}

/// The openAPIV3Schema of each TARSy kind, as JSON.
pub fn schemas() -> BTreeMap<String, Value> {
    KINDS
        .iter()
        .filter_map(|(kind, _)| Some((kind.to_string(), kind_schema(kind)?.schema.clone())))
        .collect()
}

/// The schema of `kind`, if it is a TARSy kind.
pub fn schema_for(kind: &str) -> Option<&'static Value> {
    kind_schema(kind).map(|k| &k.schema)
}

/// Validates a whole object (`apiVersion`, `kind`, `metadata`, `spec`,
/// `status`) of a TARSy kind: structure, then CEL rules. `old` is the previous version, for transition rules.
pub fn validate_object(value: &Value, old: Option<&Value>) -> Result<(), Vec<Violation>> {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(compiled) = kind_schema(kind) else {
        let mut kinds: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
        kinds.sort_unstable();
        return Err(vec![Violation {
            path: "kind".into(),
            message: format!(
                "unknown kind {kind:?}; expected one of: {}",
                kinds.join(", ")
            ),
        }]);
    };
    let schema = &compiled.schema;
    let mut violations = Vec::new();
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(crate::model::API_VERSION) {
        violations.push(Violation {
            path: "apiVersion".into(),
            message: format!(
                "expected {:?}, found {:?}",
                crate::model::API_VERSION,
                api_version.unwrap_or_default()
            ),
        });
    }
    let has_name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name {
        violations.push(Violation {
            path: "metadata.name".into(),
            message: "required field is missing".into(),
        });
    }
    // The API server owns apiVersion, kind and metadata; the CRD schema
    // describes the rest.
    let mut body = value.clone();
    if let Some(map) = body.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
    }
    violations.extend(check_structure(schema, &body));
    if violations.is_empty() {
        violations.extend(cel_violations(
            kube_cel::Validator::new().validate_compiled(&compiled.rules, value, old),
        ));
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// Evaluates the schema's CEL rules against `value` (`old` for transition rules).
pub fn check_cel(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<Violation> {
    cel_violations(kube_cel::Validator::new().validate(schema, value, old))
}

fn cel_violations(result: Result<(), kube_cel::ValidationErrors>) -> Vec<Violation> {
    match result {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| Violation {
                path: e.field_path.clone(),
                message: e.message.clone(),
            })
            .collect(),
    }
}

/// Checks `value` against the OpenAPI keywords of `schema` (the subset CRD
/// schemas use). Returns every violation found.
pub fn check_structure(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(schema, value, String::new(), &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn push(out: &mut Vec<Violation>, path: &str, message: String) {
    out.push(Violation {
        path: path.to_string(),
        message,
    });
}

fn walk(schema: &Value, value: &Value, path: String, out: &mut Vec<Violation>) {
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            push(out, &path, "must not be null".into());
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let ok = actual == expected || (expected == "number" && actual == "integer");
        if !ok {
            push(out, &path, format!("expected {expected}, found {actual}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect();
        push(
            out,
            &path,
            format!(
                "unsupported value {value}; expected one of: {}",
                names.join(", ")
            ),
        );
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                push(out, &path, format!("must be at least {min}, got {n}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                push(out, &path, format!("must be at most {max}, got {n}"));
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                push(
                    out,
                    &path,
                    format!("must be at least {min} characters long"),
                );
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                push(
                    out,
                    &path,
                    format!("must be at most {max} characters long, got {len}"),
                );
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                push(out, &path, format!("must have at least {min} item(s)"));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                push(
                    out,
                    &path,
                    format!("must have at most {max} items, got {len}"),
                );
            }
            check_list_type(schema, items, &path, out);
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        out.push(Violation {
                            path: join(&path, key),
                            message: "required field is missing".into(),
                        });
                    }
                }
            }
            let preserve =
                schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            let additional = schema.get("additionalProperties");
            for (key, child) in map {
                let child_path = join(&path, key);
                if let Some(child_schema) = props.and_then(|p| p.get(key)) {
                    walk(child_schema, child, child_path, out);
                } else if let Some(add) = additional.filter(|a| a.is_object()) {
                    walk(add, child, child_path, out);
                } else if props.is_some() && !preserve && additional.is_none() {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    out.push(Violation {
                        path: child_path,
                        message: format!("unknown field; known fields: {}", known.join(", ")),
                    });
                }
            }
        }
        _ => {}
    }
}

fn check_list_type(schema: &Value, items: &[Value], path: &str, out: &mut Vec<Violation>) {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(item.to_string()) {
                    out.push(Violation {
                        path: format!("{path}[{i}]"),
                        message: format!("duplicate value {item}"),
                    });
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let key: Vec<String> = keys
                    .iter()
                    .map(|k| item.get(*k).map(Value::to_string).unwrap_or_default())
                    .collect();
                if !seen.insert(key.clone()) {
                    out.push(Violation {
                        path: format!("{path}[{i}]"),
                        message: format!(
                            "duplicate entry with {} {}",
                            keys.join("/"),
                            key.join("/")
                        ),
                    });
                }
            }
        }
        _ => {}
    }
}
