//! The committed manifests match the types; the CRDs carry what `kubectl`
//! users rely on (descriptions, printer columns, short names, status).

use std::path::PathBuf;

use serde_json::Value;
use tarsy_config::schema::schemas;
use tarsy_crds::{all_crds, render_manifests, stale_manifests, write_manifests};

fn manifests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

#[test]
fn committed_manifests_are_fresh() {
    let dir = manifests_dir();
    if std::env::var_os("TARSY_UPDATE_CRDS").is_some_and(|v| v == "1") {
        write_manifests(&dir).unwrap();
    }
    let stale = stale_manifests(&dir).unwrap();
    assert!(
        stale.is_empty(),
        "CRD manifests are stale: {stale:?}. Regenerate them with `cargo run -p tarsy -- crdgen` \
         (or `TARSY_UPDATE_CRDS=1 cargo test -p tarsy-crds --test manifests`) and commit the result."
    );
    // No leftover files from renamed kinds.
    let expected: Vec<String> = render_manifests().into_iter().map(|(f, _)| f).collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            expected.contains(&file),
            "unexpected file {file} in kubernetes/crds/manifests"
        );
    }
}

#[test]
fn manifests_are_valid_crd_yaml() {
    for (file, yaml) in render_manifests() {
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(crd.spec.group, "tarsy.dev", "{file}");
        assert_eq!(crd.spec.scope, "Namespaced", "{file}");
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        assert!(v.served && v.storage);
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{file}: status subresource"
        );
        assert!(
            crd.spec
                .names
                .short_names
                .as_ref()
                .is_some_and(|s| !s.is_empty()),
            "{file}: short names"
        );
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["tarsy".to_string()][..])
        );
        let columns = v.additional_printer_columns.as_deref().unwrap_or_default();
        assert!(
            columns.iter().any(|c| c.name == "Age"),
            "{file}: Age column"
        );
    }
}

#[test]
fn alert_columns_show_type_phase_stage_score_cost_age() {
    let alert = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Alert")
        .unwrap();
    let cols: Vec<(String, String)> = alert.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap()
        .into_iter()
        .filter(|c| c.priority.unwrap_or(0) == 0)
        .map(|c| (c.name, c.json_path))
        .collect();
    let expected = [
        ("Type", ".spec.alertType"),
        ("Phase", ".status.phase"),
        ("Stage", ".status.currentStage"),
        ("Score", ".status.score"),
        ("Cost", ".status.cost.usd"),
        ("Age", ".metadata.creationTimestamp"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(cols, expected);
}

/// `kubectl explain` shows a description for every field: walk every schema
/// and require one on each property (standard Kubernetes types included).
#[test]
fn every_field_has_a_description() {
    fn walk(path: &str, schema: &Value, missing: &mut Vec<String>, seen: &mut usize) {
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (name, child) in props {
                *seen += 1;
                let p = format!("{path}.{name}");
                let described = child
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.trim().is_empty());
                if !described {
                    missing.push(p.clone());
                }
                walk(&p, child, missing, seen);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(s @ Value::Object(_)) = schema.get(key) {
                walk(&format!("{path}[]"), s, missing, seen);
            }
        }
    }
    let mut missing = Vec::new();
    let mut seen = 0;
    for (kind, schema) in &schemas() {
        walk(kind, schema, &mut missing, &mut seen);
    }
    assert!(seen > 200, "only {seen} fields walked");
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:#?}"
    );
}

/// The API server only accepts structural schemas: every node has a type,
/// no references, no type-bearing combinators.
#[test]
fn schemas_are_structural() {
    fn walk(path: &str, schema: &Value, problems: &mut Vec<String>) {
        let preserve = schema.get("x-kubernetes-preserve-unknown-fields")
            == Some(&Value::Bool(true))
            || schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        if schema.get("type").is_none() && !preserve {
            problems.push(format!("{path}: no type"));
        }
        for key in [
            "$ref",
            "anyOf",
            "oneOf",
            "allOf",
            "not",
            "definitions",
            "$defs",
        ] {
            if schema.get(key).is_some() {
                problems.push(format!("{path}: has {key}"));
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (name, child) in props {
                walk(&format!("{path}.{name}"), child, problems);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(s @ Value::Object(_)) = schema.get(key) {
                walk(&format!("{path}[]"), s, problems);
            }
        }
    }
    let mut problems = Vec::new();
    for (kind, schema) in &schemas() {
        walk(kind, schema, &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Validation reads the committed manifests; they must carry exactly the
/// schemas the types generate.
#[test]
fn validation_uses_the_schemas_the_types_generate() {
    let from_manifests = schemas();
    assert_eq!(from_manifests.len(), all_crds().len());
    for crd in all_crds() {
        let kind = &crd.spec.names.kind;
        let generated = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .map(|s| serde_json::to_value(s).unwrap());
        assert_eq!(
            from_manifests.get(kind),
            generated.as_ref(),
            "{kind}: the schema validation uses differs from the generated one"
        );
    }
}
