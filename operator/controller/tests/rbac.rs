//! The RBAC manifests in `rbac/` grant what the operator, runner and
//! investigator need and nothing broader where it matters (the runner's
//! write access, Secrets).

use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde::Deserialize;

fn docs(file: &str) -> Vec<serde_yaml::Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("rbac")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .collect()
}

fn of_kind<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> Vec<T> {
    docs(file)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| serde_yaml::from_value(d).unwrap())
        .collect()
}

fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().flatten().any(|g| g == group)
            && r.resources.iter().flatten().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn runner_may_only_write_agentexecution_status() {
    let roles: Vec<Role> = of_kind("runner.yaml", "Role");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap();
    assert!(grants(
        &rules,
        "tarsy.dev",
        "agentexecutions/status",
        "patch"
    ));
    assert!(grants(&rules, "tarsy.dev", "agentexecutions", "get"));
    // It rebuilds its config from the providers and servers it names.
    assert!(grants(&rules, "tarsy.dev", "llmproviders", "list"));
    assert!(grants(&rules, "tarsy.dev", "mcpservers", "list"));
    for r in &rules {
        for res in r.resources.iter().flatten() {
            match res.as_str() {
                "agentexecutions" => {
                    assert_eq!(r.verbs, ["get"], "runner may only read its execution")
                }
                "llmproviders" | "mcpservers" => {
                    assert_eq!(r.verbs, ["get", "list"], "runner may only read {res}")
                }
                other => assert!(other.starts_with("agentexecutions/"), "runner gets {other}"),
            }
        }
    }
    assert!(of_kind::<ClusterRole>("runner.yaml", "ClusterRole").is_empty());
}

#[test]
fn investigator_reads_the_cluster_but_not_secrets() {
    let roles: Vec<ClusterRole> = of_kind("investigator.yaml", "ClusterRole");
    let rules = roles[0].rules.clone().unwrap();
    assert!(grants(&rules, "", "pods", "list"));
    assert!(grants(&rules, "apps", "deployments", "watch"));
    for r in &rules {
        assert!(
            !r.resources
                .iter()
                .flatten()
                .any(|x| x == "secrets" || x == "*")
        );
        for v in &r.verbs {
            assert!(
                matches!(v.as_str(), "get" | "list" | "watch"),
                "writes: {v}"
            );
        }
    }
}

#[test]
fn operator_can_do_its_job() {
    let roles: Vec<ClusterRole> = of_kind("operator.yaml", "ClusterRole");
    let rules = roles[0].rules.clone().unwrap();
    for kind in [
        "alerts",
        "chains",
        "agents",
        "mcpservers",
        "llmproviders",
        "agentexecutions",
    ] {
        assert!(grants(&rules, "tarsy.dev", kind, "watch"), "{kind}");
        assert!(
            grants(&rules, "tarsy.dev", &format!("{kind}/status"), "patch"),
            "{kind}"
        );
    }
    assert!(grants(&rules, "tarsy.dev", "agentexecutions", "create"));
    assert!(
        grants(&rules, "tarsy.dev", "alerts", "update"),
        "finalizers"
    );
    assert!(grants(&rules, "", "pods", "create"));
    assert!(grants(&rules, "", "pods", "delete"));
    assert!(grants(&rules, "", "secrets", "get"));
    assert!(grants(&rules, "events.k8s.io", "events", "create"));
    let lease: Vec<Role> = of_kind("operator.yaml", "Role");
    assert!(grants(
        &lease[0].rules.clone().unwrap(),
        "coordination.k8s.io",
        "leases",
        "update"
    ));
}
