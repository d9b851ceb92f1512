//! How recalled memories are shown to an investigating agent: a section of
//! its prompt, one bullet per memory with where it came from, so the agent
//! can weigh it (and check it) rather than take it as given.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use tarsy_core::{MemoryCategory, MemoryValence};

use crate::text;

/// At most this many memories go into a prompt; the store picks them.
pub const MAX_INJECTED: usize = 5;

/// The longest memory text shown, in characters (memories are written to
/// be at most 300; older or edited ones are clipped here, not trusted).
const MAX_SHOWN_CHARS: usize = 500;

/// The title of the prompt section.
pub const SECTION_TITLE: &str = "## Lessons from past investigations";

/// A memory as an agent sees it: what it says and its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownMemory {
    /// The memory's id (not shown to the agent; kept to record what was shown).
    pub id: String,
    /// What it says.
    pub content: String,
    /// What it is about.
    pub category: MemoryCategory,
    /// Whether it helped or misled the investigation it came from.
    pub valence: MemoryValence,
    /// How sure the reflector (and later reinforcement) is, 0–1.
    pub confidence: f64,
    /// The session it was learned in, when known.
    pub source_session_id: Option<String>,
    /// Whole days since it was learned.
    pub age_days: u32,
}

/// The prompt section of recalled memories, `None` when there are none (no
/// empty section). At most [`MAX_INJECTED`] are shown, in the given order.
pub fn memory_section(memories: &[ShownMemory]) -> Option<String> {
    if memories.is_empty() {
        return None;
    }
    let memories = &memories[..memories.len().min(MAX_INJECTED)];
    let mut s = String::from(SECTION_TITLE);
    s.push_str(
        "\n\nThese notes were learned from earlier investigations in this environment. \
         They may be outdated or wrong: verify one with your tools before relying on it, \
         and when a tool shows something else now, trust the tool.",
    );
    if memories.iter().any(|m| m.valence == MemoryValence::Misled) {
        s.push_str(" A warning marks something that misled an earlier investigation.");
    }
    s.push_str("\n\n");
    for m in memories {
        let _ = writeln!(s, "- {}", bullet(m));
    }
    Some(s)
}

/// One memory on one line: its text (a warning when it misled) and its
/// provenance in parentheses.
pub(crate) fn bullet(m: &ShownMemory) -> String {
    let content = text::clip(&text::one_line(&m.content), MAX_SHOWN_CHARS);
    let body = match m.valence {
        MemoryValence::Misled => {
            format!("Warning, this misled an earlier investigation: {content}")
        }
        MemoryValence::Helped | MemoryValence::Neutral => content,
    };
    format!("{body} ({})", provenance(m))
}

/// `procedure, from session s-1, confidence 0.8, learned 3 days ago`.
fn provenance(m: &ShownMemory) -> String {
    let mut parts = vec![m.category.as_str().to_string()];
    if let Some(session) = m
        .source_session_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        parts.push(format!("from session {}", text::clip(session, 80)));
    }
    parts.push(format!("confidence {}", text::confidence(m.confidence)));
    parts.push(text::learned(m.age_days));
    parts.join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn memory(
        id: &str,
        content: &str,
        category: MemoryCategory,
        valence: MemoryValence,
    ) -> ShownMemory {
        ShownMemory {
            id: id.into(),
            content: content.into(),
            category,
            valence,
            confidence: 0.8,
            source_session_id: Some(format!("sess-{id}")),
            age_days: 3,
        }
    }

    #[test]
    fn no_memories_no_section() {
        assert_eq!(memory_section(&[]), None);
    }

    #[test]
    fn the_section_is_exact_and_deterministic() {
        let mut second = memory(
            "m2",
            "The `http_errors_total` metric\ndoes not exist here;\n use `nginx_5xx`.",
            MemoryCategory::Fact,
            MemoryValence::Misled,
        );
        second.confidence = 0.55;
        second.source_session_id = None;
        second.age_days = 1;
        let shown = [
            memory(
                "m1",
                "Check the connection pool of orders-db first.",
                MemoryCategory::Procedure,
                MemoryValence::Helped,
            ),
            second,
        ];
        let expected = "\
## Lessons from past investigations

These notes were learned from earlier investigations in this environment. They may be \
outdated or wrong: verify one with your tools before relying on it, and when a tool shows \
something else now, trust the tool. A warning marks something that misled an earlier \
investigation.

- Check the connection pool of orders-db first. (procedure, from session sess-m1, \
confidence 0.8, learned 3 days ago)
- Warning, this misled an earlier investigation: The `http_errors_total` metric does not \
exist here; use `nginx_5xx`. (fact, confidence 0.55, learned 1 day ago)
";
        assert_eq!(memory_section(&shown).as_deref(), Some(expected));
        assert_eq!(memory_section(&shown), memory_section(&shown));
    }

    #[test]
    fn without_a_misled_memory_there_is_no_warning_sentence() {
        let mut m = memory(
            "m1",
            "Batch jobs raise the error rate nightly; normal.",
            MemoryCategory::Fact,
            MemoryValence::Neutral,
        );
        m.age_days = 0;
        m.confidence = 1.0;
        let s = memory_section(&[m]).unwrap();
        assert!(!s.contains("A warning marks"));
        assert!(s.ends_with(
            "- Batch jobs raise the error rate nightly; normal. (fact, from session sess-m1, \
             confidence 1.0, learned today)\n"
        ));
        assert!(s.contains("may be outdated"));
        assert!(s.contains("verify"));
    }

    #[test]
    fn at_most_five_are_shown_and_long_ones_are_clipped() {
        let long = "x".repeat(2000);
        let many: Vec<_> = (0..8)
            .map(|i| {
                memory(
                    &i.to_string(),
                    &format!("memory number {i} {long}"),
                    MemoryCategory::Experience,
                    MemoryValence::Neutral,
                )
            })
            .collect();
        let s = memory_section(&many).unwrap();
        assert_eq!(s.lines().filter(|l| l.starts_with("- ")).count(), 5);
        assert!(s.contains("memory number 4") && !s.contains("memory number 5"));
        assert!(s.len() < 5 * 700);
        assert!(s.contains("x… (experience"));
    }

    #[test]
    fn a_blank_source_session_is_not_shown() {
        let mut m = memory("m", "c", MemoryCategory::Fact, MemoryValence::Helped);
        m.source_session_id = Some("  ".into());
        assert_eq!(bullet(&m), "c (fact, confidence 0.8, learned 3 days ago)");
    }
}
