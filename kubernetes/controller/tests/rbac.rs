//! RBAC has one source, the Helm chart (`charts/tarsy`): this test renders
//! it with `helm template` and checks that each role grants what its process
//! needs and nothing broader where it matters — the runner may read its
//! AgentExecution and patch its status, only in the watched namespaces; the
//! investigator reads the cluster but never Secrets.
//!
//! helm is the one `charts/ci.sh` installs (`~/.cache/tarsy/chart-tools`),
//! or `TARSY_HELM`; `scripts/test-all` runs the chart CI first.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::Deserialize;

const RELEASE: &str = "t";
const NS: &str = "tarsy";

fn helm() -> PathBuf {
    if let Some(h) = std::env::var_os("TARSY_HELM") {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cached = home.join(".cache/tarsy/chart-tools/bin/helm");
    assert!(
        cached.exists(),
        "helm not found at {}: run `bash charts/ci.sh` (it installs helm) or set TARSY_HELM",
        cached.display()
    );
    cached
}

/// The chart rendered with `values` (`--set` pairs).
fn render(values: &[&str]) -> Vec<serde_yaml::Value> {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/tarsy");
    let mut cmd = Command::new(helm());
    cmd.args(["template", RELEASE]).arg(&chart).args([
        "--namespace",
        NS,
        "--set",
        "database.existingSecret=db",
    ]);
    for v in values {
        cmd.args(["--set", v]);
    }
    let out = cmd.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 manifests");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("YAML"))
        .filter(|d| !d.is_null())
        .collect()
}

fn named<T: serde::de::DeserializeOwned>(
    docs: &[serde_yaml::Value],
    kind: &str,
    name: &str,
) -> Vec<T> {
    docs.iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .map(|d| serde_yaml::from_value(d.clone()).expect(kind))
        .collect()
}

fn rules_of(docs: &[serde_yaml::Value], role: &str) -> Vec<PolicyRule> {
    let roles: Vec<ClusterRole> = named(docs, "ClusterRole", &format!("{RELEASE}-tarsy-{role}"));
    assert_eq!(roles.len(), 1, "ClusterRole {role}");
    roles[0].rules.clone().unwrap_or_default()
}

fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().flatten().any(|g| g == group)
            && r.resources.iter().flatten().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn runner_may_read_its_execution_and_patch_its_status_only() {
    let docs = render(&["watchNamespaces={team-a,team-b}"]);
    let rules = rules_of(&docs, "runner");
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
            let expected: &[&str] = match res.as_str() {
                "agentexecutions" => &["get"],
                "agentexecutions/status" => &["patch"],
                "llmproviders" | "mcpservers" => &["get", "list"],
                other => panic!("the runner is granted {other}"),
            };
            assert_eq!(r.verbs, expected, "runner verbs on {res}");
        }
    }
    // Bound in each watched namespace, never cluster-wide.
    let role_ref =
        |b: &serde_yaml::Value| b["roleRef"]["name"] == format!("{RELEASE}-tarsy-runner");
    let bindings: Vec<RoleBinding> = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && role_ref(d))
        .map(|d| serde_yaml::from_value(d.clone()).unwrap())
        .collect();
    let mut namespaces: Vec<_> = bindings
        .iter()
        .filter_map(|b| b.metadata.namespace.clone())
        .collect();
    namespaces.sort();
    assert_eq!(namespaces, ["team-a", "team-b"]);
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "ClusterRoleBinding" && role_ref(d)),
        "the runner role must not be bound cluster-wide"
    );
}

#[test]
fn investigator_reads_the_cluster_but_not_secrets() {
    let docs = render(&[]);
    let rules = rules_of(&docs, "investigator");
    assert!(grants(&rules, "", "pods", "list"));
    assert!(grants(&rules, "", "pods/log", "get"));
    assert!(grants(&rules, "apps", "deployments", "watch"));
    for r in &rules {
        assert!(
            !r.resources
                .iter()
                .flatten()
                .any(|x| x == "secrets" || x == "*"),
            "the investigator reads {:?}",
            r.resources
        );
        for v in &r.verbs {
            assert!(
                matches!(v.as_str(), "get" | "list" | "watch"),
                "writes: {v}"
            );
        }
    }
    let bindings: Vec<ClusterRoleBinding> = named(
        &docs,
        "ClusterRoleBinding",
        &format!("{RELEASE}-tarsy-investigator-{NS}"),
    );
    assert_eq!(bindings.len(), 1);
}

#[test]
fn operator_can_do_its_job() {
    let docs = render(&[]);
    let rules = rules_of(&docs, "operator");
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
    assert!(
        grants(&rules, "tarsy.dev", "alerts", "delete"),
        "finished Alerts are deleted after their TTL"
    );
    assert!(grants(&rules, "", "pods", "create"));
    assert!(grants(&rules, "", "pods", "delete"));
    assert!(grants(&rules, "", "secrets", "get"));
    assert!(grants(&rules, "events.k8s.io", "events", "create"));
    let lease: Vec<Role> = named(&docs, "Role", &format!("{RELEASE}-tarsy-leader-election"));
    assert!(grants(
        &lease[0].rules.clone().unwrap_or_default(),
        "coordination.k8s.io",
        "leases",
        "update"
    ));
}

#[test]
fn investigation_pods_accept_no_inbound_traffic() {
    let docs = render(&["networkPolicy.enabled=true"]);
    let policy = docs
        .iter()
        .find(|d| {
            d["kind"] == "NetworkPolicy"
                && d["metadata"]["name"] == format!("{RELEASE}-tarsy-investigation-pods")
        })
        .expect("a NetworkPolicy for investigation pods");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/managed-by"],
        tarsy_crds::contract::MANAGED_BY
    );
    assert_eq!(
        policy["spec"]["ingress"],
        serde_yaml::Value::Sequence(Vec::new())
    );
}
