//! The contract between TARSy's cluster-side processes — the operator, the
//! investigation-pod runner and the cluster API: the names, labels and
//! annotations of what they create, the AgentExecution object itself, and
//! the environment the runner is started with. Written once here so the
//! writers and the readers cannot drift.
//!
//! Child objects are named from their identity so that a reconcile that runs
//! twice (or after an operator restart) finds what it created instead of
//! creating it again.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use tarsy_config::convert::env_name_for_key;

use crate::{
    API_VERSION, AgentExecution, AgentExecutionSpec, Alert, ChatRequestSpec, ExecutionKind,
    ResolvedConfigSpec, SecretKeyRef, StageRef,
};

pub use crate::agent_execution::{STOP_ANNOTATION, STOP_CANCELLED, STOP_TIMED_OUT};

/// Annotation the operator sets on an Alert it deletes because its TTL after
/// a terminal phase passed: the session's records stay listed (a user's
/// own deletion hides them).
pub const EXPIRED_ANNOTATION: &str = "tarsy.dev/expired";

/// Annotation the API sets on a finished Alert to ask for a follow-up chat
/// answer: the id of the chat stage (in Postgres) whose AgentExecution the
/// operator is to create. The API writes the question's records; the
/// operator alone writes AgentExecutions.
pub const CHAT_ANNOTATION: &str = "tarsy.dev/chat-stage";

/// Annotation set on a finished Alert to ask for a scoring run: the id of
/// the judge's stage (in Postgres) whose AgentExecution the operator is to
/// create. Whoever starts the attempt (the API for a re-score, the operator
/// when a session completes) writes its records; the operator alone writes
/// AgentExecutions.
pub const SCORE_ANNOTATION: &str = "tarsy.dev/score-stage";

/// The merge patch by which an Alert asks for the judge of the scoring
/// stage `stage_id` ([`SCORE_ANNOTATION`]).
pub fn score_request_patch(stage_id: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {SCORE_ANNOTATION: stage_id}}})
}

/// Annotation set on a finished Alert to ask for a reflector (investigation
/// memory learning from the session): the id of the reflector's stage (in
/// Postgres). Whoever starts it (the operator after a score, the API after
/// a review's feedback) writes its records; the operator alone writes
/// AgentExecutions. It only wakes the Alert's reconcile: every reflector
/// stage of the session not started yet gets its AgentExecution.
pub const REFLECT_ANNOTATION: &str = "tarsy.dev/reflect-stage";

/// The merge patch by which an Alert asks for the reflector of the memory
/// stage `stage_id` ([`REFLECT_ANNOTATION`]).
pub fn reflect_request_patch(stage_id: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {REFLECT_ANNOTATION: stage_id}}})
}

/// Label of an Alert: the project its investigation memory belongs to,
/// within its namespace (memories never cross a namespace, nor a project).
pub const LABEL_PROJECT: &str = "tarsy.dev/project";

/// The memory scope of an Alert in `namespace` labelled with `project`
/// ([`LABEL_PROJECT`]): `namespace`, or `namespace/project`.
pub fn memory_scope(namespace: &str, project: Option<&str>) -> String {
    match project.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => format!("{namespace}/{p}"),
        None => namespace.to_string(),
    }
}

/// Label: name of the Alert an execution or pod belongs to.
pub const LABEL_ALERT: &str = "tarsy.dev/alert";
/// Label: name of the AgentExecution a pod runs.
pub const LABEL_EXECUTION: &str = "tarsy.dev/execution";
/// Label: session id (the Alert UID).
pub const LABEL_SESSION: &str = "tarsy.dev/session";
/// Label: who manages the object.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "tarsy-operator";

/// The environment `tarsy runner` is started with (the pod builder sets it,
/// the runner's command line reads it).
pub mod runner_env {
    /// `NAMESPACE/NAME` of its AgentExecution.
    pub const EXECUTION: &str = "TARSY_EXECUTION";
    /// Postgres URL (from a Secret).
    pub const DATABASE_URL: &str = "TARSY_DATABASE_URL";
    /// Address of the LLM service (`http://host:port`).
    pub const LLM_SERVICE: &str = "TARSY_LLM_SERVICE_ADDR";
    /// `name=port,...` of each stdio server's bridge.
    pub const BRIDGE_PORTS: &str = "TARSY_MCP_BRIDGE_PORTS";
    /// `name=url,...` of every MCP server on localhost.
    pub const MCP_ENDPOINTS: &str = "TARSY_MCP_ENDPOINTS";
    /// Directory relative `scripted` provider scripts are read from.
    pub const SCRIPT_DIR: &str = "TARSY_SCRIPT_DIR";
    /// Seconds to keep retrying Postgres at start.
    pub const DATABASE_RETRY_SECONDS: &str = "TARSY_DATABASE_RETRY_SECONDS";
    /// The pod's own name (downward API).
    pub const POD_NAME: &str = "TARSY_POD_NAME";
    /// The pod's namespace (downward API).
    pub const POD_NAMESPACE: &str = "TARSY_POD_NAMESPACE";
    /// The token sent with runbook downloads to private repositories (from
    /// a Secret, never a value; local mode reads the same variable).
    pub use tarsy_config::defaults::RUNBOOK_TOKEN_ENV as RUNBOOK_TOKEN;
}

/// The environment variable through which the runner receives the value of
/// Secret key `r` (e.g. a remote server's bearer token):
/// `TARSY_SECRET_{NAME}__{KEY}`, upper-cased, other characters → `_`.
pub fn secret_env_name(r: &SecretKeyRef) -> String {
    format!(
        "TARSY_SECRET_{}__{}",
        env_name_for_key(&r.name),
        env_name_for_key(&r.key)
    )
}

/// Longest DNS label (RFC 1123), which also bounds label values and pod
/// hostnames.
pub const MAX_DNS_LABEL: usize = 63;

/// FNV-1a, 64 bits: stable across Rust versions and platforms, unlike
/// `DefaultHasher`, so names never change on an operator upgrade.
pub fn stable_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Turns `raw` into a DNS label: lowercase `[a-z0-9-]`, no leading, trailing
/// or doubled dashes, at most 63 characters. When characters had to be
/// replaced or the result would be too long, an 8-hex-digit hash of `raw` is
/// appended so that distinct inputs keep distinct names.
pub fn dns_label(raw: &str) -> String {
    let lower = raw.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut replaced = false;
    for c in lower.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            c
        } else {
            replaced = true;
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    if !replaced && !out.is_empty() && out.len() <= MAX_DNS_LABEL && out == lower {
        return out;
    }
    let suffix = format!("{:08x}", stable_hash(raw) as u32);
    let keep = MAX_DNS_LABEL - suffix.len() - 1;
    out.truncate(keep);
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        format!("x-{suffix}")
    } else {
        format!("{out}-{suffix}")
    }
}

/// Name of the AgentExecution (and its pod) running `agent` (display name)
/// in stage record `stage_index` of `alert`: `{alert}-s{stage}-{agent}`.
pub fn execution_name(alert: &str, stage_index: u32, agent: &str) -> String {
    dns_label(&format!("{alert}-s{stage_index}-{agent}"))
}

/// A label value for `raw`: unchanged when already valid (≤ 63 characters of
/// `[A-Za-z0-9._-]`, alphanumeric at both ends), otherwise a DNS label form
/// of it.
pub fn label_value(raw: &str) -> String {
    let valid_chars = raw
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let valid_ends = raw
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && raw
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if raw.is_empty() || (valid_chars && valid_ends && raw.len() <= MAX_DNS_LABEL) {
        raw.to_string()
    } else {
        dns_label(raw)
    }
}

/// The owner reference of an Alert's children.
pub fn owner_ref(alert: &Alert) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.into(),
        kind: "Alert".into(),
        name: alert.metadata.name.clone().unwrap_or_default(),
        uid: alert.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `ae` belongs to the Alert with `uid` (its owner reference).
pub fn owned_by(ae: &AgentExecution, uid: &str) -> bool {
    ae.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.kind == "Alert")
}

/// The label selector of an Alert's AgentExecutions.
pub fn executions_selector(alert_name: &str) -> String {
    format!("{LABEL_ALERT}={}", label_value(alert_name))
}

/// What one AgentExecution is, besides the Alert that owns it.
#[derive(Debug, Clone)]
pub struct ExecutionRequest {
    /// The stage it belongs to.
    pub stage: StageRef,
    /// Agent definition name.
    pub agent_name: String,
    /// Name in records (`{agent}-N` for replicas).
    pub display_name: String,
    /// 1-based position in its stage.
    pub agent_index: u32,
    /// investigation, synthesis or chat.
    pub kind: ExecutionKind,
    /// The resolved configuration.
    pub resolved: ResolvedConfigSpec,
    /// The question, for a chat answer.
    pub chat: Option<ChatRequestSpec>,
    /// When its session (or chat answer) times out.
    pub deadline: Option<Time>,
}

/// The AgentExecution `alert` owns for `request`: deterministic name,
/// labels, owner reference and spec — the same object whoever creates it
/// (the operator for stages, the cluster API for chat answers).
pub fn execution_for(alert: &Alert, chain: &str, request: ExecutionRequest) -> AgentExecution {
    let alert_name = alert.metadata.name.clone().unwrap_or_default();
    let uid = alert.metadata.uid.clone().unwrap_or_default();
    AgentExecution {
        metadata: ObjectMeta {
            name: Some(execution_name(
                &alert_name,
                request.stage.index,
                &request.display_name,
            )),
            namespace: alert.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (LABEL_ALERT.to_string(), label_value(&alert_name)),
                (LABEL_SESSION.to_string(), label_value(&uid)),
                (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
            ])),
            owner_references: Some(vec![owner_ref(alert)]),
            ..ObjectMeta::default()
        },
        spec: AgentExecutionSpec {
            session_id: uid,
            alert_name,
            chain: chain.to_string(),
            stage: request.stage,
            agent_name: request.agent_name,
            display_name: request.display_name,
            agent_index: request.agent_index,
            kind: request.kind,
            resolved: request.resolved,
            chat: request.chat,
            deadline: request.deadline,
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= MAX_DNS_LABEL
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[test]
    fn simple_names_are_readable() {
        assert_eq!(
            execution_name("pod-crash", 1, "KubernetesAgent"),
            "pod-crash-s1-kubernetesagent"
        );
        assert_eq!(
            execution_name("pod-crash", 2, "KubernetesAgent-2"),
            "pod-crash-s2-kubernetesagent-2"
        );
    }

    #[test]
    fn names_are_deterministic_and_distinct() {
        let a = execution_name("alert", 1, "My Agent");
        assert_eq!(a, execution_name("alert", 1, "My Agent"));
        assert!(is_dns_label(&a), "{a}");
        // Sanitizing would merge these two; the hash keeps them apart.
        assert_ne!(a, execution_name("alert", 1, "my-agent"));
    }

    #[test]
    fn long_names_are_shortened_with_a_hash() {
        let long = "a".repeat(200);
        let one = execution_name(&long, 1, "KubernetesAgent-1");
        let two = execution_name(&long, 1, "KubernetesAgent-2");
        assert!(is_dns_label(&one), "{one}");
        assert_eq!(one.len(), MAX_DNS_LABEL);
        assert_ne!(one, two);
    }

    #[test]
    fn odd_input_still_gives_a_label() {
        for raw in ["___", "", "-x-", "ÄÖÜ", "a..b"] {
            let l = dns_label(raw);
            assert!(is_dns_label(&l), "{raw:?} -> {l:?}");
        }
    }

    #[test]
    fn label_values_pass_through_when_valid() {
        assert_eq!(label_value("my.alert_1"), "my.alert_1");
        let long = label_value(&"b".repeat(100));
        assert!(long.len() <= MAX_DNS_LABEL);
    }
}
