//! The one naming rule for TARSy's documents, in both modes: an object name
//! is what Kubernetes accepts for a custom resource (an RFC 1123 subdomain:
//! lowercase letters, digits, `-` and `.`, starting and ending with a letter
//! or a digit, at most 253 characters). Local mode applies it too, so a
//! configuration that loads on a laptop applies to a cluster unchanged. How
//! an agent is called in prompts, timelines and the dashboard is its
//! `spec.displayName`, which has no such limits.

/// Longest object name Kubernetes accepts.
pub const MAX_OBJECT_NAME_CHARS: usize = 253;

/// Why `name` cannot name an object, or `None` when it can.
pub fn object_name_problem(name: &str) -> Option<String> {
    let rule = "an object name must be lowercase letters, digits, '-' or '.', starting and \
                ending with a letter or digit (the rule Kubernetes applies)";
    if name.is_empty() {
        return Some("metadata.name is missing".into());
    }
    if name.len() > MAX_OBJECT_NAME_CHARS {
        return Some(format!(
            "the name is {} characters long; at most {MAX_OBJECT_NAME_CHARS} are allowed",
            name.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.chars().all(allowed) && edge(name.chars().next()) && edge(name.chars().last()) {
        return None;
    }
    let suggestion = suggested_name(name);
    let hint = if object_name_problem(&suggestion).is_none() {
        format!("; e.g. {suggestion:?}")
    } else {
        String::new()
    };
    Some(format!("{name:?}: {rule}{hint}"))
}

/// `DataCollector` → `data-collector`, `Pod_Alerts` → `pod-alerts`.
fn suggested_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
        previous = Some(c);
    }
    out.trim_matches(|c| c == '-' || c == '.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_names_pass() {
        for name in ["a", "pod-alerts", "kubernetes-agent", "db.v2", "x1"] {
            assert_eq!(object_name_problem(name), None, "{name}");
        }
    }

    #[test]
    fn other_names_are_refused_with_a_suggestion() {
        let p = object_name_problem("DataCollector").unwrap();
        assert!(p.contains("e.g. \"data-collector\""), "{p}");
        let p = object_name_problem("pod_alerts").unwrap();
        assert!(p.contains("e.g. \"pod-alerts\""), "{p}");
        assert!(object_name_problem("-x").is_some());
        assert!(object_name_problem("x-").is_some());
        assert!(object_name_problem("").unwrap().contains("missing"));
        assert!(
            object_name_problem(&"a".repeat(254))
                .unwrap()
                .contains("254")
        );
        assert_eq!(suggested_name("RootCauseAgent"), "root-cause-agent");
        assert_eq!(suggested_name("Agent2Go"), "agent2-go");
    }
}
