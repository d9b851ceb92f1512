//! Deterministic, DNS-safe names and label values.
//!
//! Child objects are named from their identity so that a reconcile that runs
//! twice (or after an operator restart) finds what it created instead of
//! creating it again.

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

/// Postgres id of a stage record: derived from the session id and the
/// record's index so that creating it again is a no-op.
pub fn stage_id(session_id: &str, stage_index: u32) -> String {
    format!("{session_id}-s{stage_index}")
}

/// Postgres id of an agent execution record (see [`stage_id`]).
pub fn execution_id(session_id: &str, stage_index: u32, agent_index: u32) -> String {
    format!("{session_id}-s{stage_index}-e{agent_index}")
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
