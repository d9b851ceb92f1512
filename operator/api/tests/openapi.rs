//! The OpenAPI document: the committed copy the dashboard's types are
//! generated from is current, it is self-contained, and it describes the
//! same endpoints as API.md.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn document() -> Value {
    serde_json::from_str(&tarsy_api::openapi_json()).expect("the document is JSON")
}

/// `(METHOD, path)` of every operation of the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            ops.insert((method.to_uppercase(), path.clone()));
        }
    }
    ops
}

#[test]
fn committed_document_is_current() {
    let path = repo_file("dashboard/openapi.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = tarsy_api::openapi_json();
    assert!(
        committed == generated,
        "dashboard/openapi.json is not the document the code generates. From the \
         repository's root, refresh it and the dashboard's types:\n\
         \n    cargo run -p tarsy-api --example openapi > dashboard/openapi.json\
         \n    (cd dashboard && npm run gen:api)\n"
    );
}

#[test]
fn document_is_openapi_3_1_and_every_reference_resolves() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemas = doc["components"]["schemas"]
        .as_object()
        .expect("component schemas");

    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected reference {r}"));
        assert!(schemas.contains_key(name), "{r} does not resolve");
    }
}

#[test]
fn every_error_status_answers_the_error_body() {
    let doc = document();
    let mut errors = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || (status.starts_with('5') && path != "/health") {
                    errors += 1;
                    assert_eq!(
                        response["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
    assert!(errors > 20, "only {errors} error responses documented");
}

#[test]
fn metrics_content_type_is_the_one_served() {
    let doc = document();
    let content = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
        .as_object()
        .unwrap();
    assert_eq!(
        content.keys().collect::<Vec<_>>(),
        [
            tarsy_telemetry::CONTENT_TYPE,
            tarsy_telemetry::CLASSIC_CONTENT_TYPE
        ]
    );
}

/// API.md's `## \`METHOD /path\`` sections and the document's operations
/// are the same set (the WebSocket is API.md's alone).
#[test]
fn api_md_and_the_document_describe_the_same_endpoints() {
    let api_md = std::fs::read_to_string(repo_file("operator/api/API.md")).unwrap();
    let described: BTreeSet<(String, String)> = api_md
        .lines()
        .filter_map(|line| line.strip_prefix("## `"))
        .filter_map(|rest| rest.split_once('`').map(|(endpoint, _)| endpoint))
        .filter_map(|endpoint| endpoint.split_once(' '))
        .map(|(method, path)| (method.to_string(), path.to_string()))
        .filter(|(_, path)| path != "/api/v1/ws")
        .collect();
    assert_eq!(described, operations(&document()));
}
