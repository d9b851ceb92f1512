//! Token estimation and the two truncation tiers (storage vs summarization
//! input). Estimates use ~4 characters per token: they drive thresholds, not
//! billing.

use std::borrow::Cow;

/// Characters per token for estimates.
pub(crate) const CHARS_PER_TOKEN: usize = 4;
/// Tool results stored on timeline events and interactions are cut here
/// (protects the dashboard and the database).
pub(crate) const STORAGE_MAX_TOKENS: usize = 8_000;
/// Input to the summarizer is cut here (safety net for its context window).
pub(crate) const SUMMARIZATION_INPUT_MAX_TOKENS: usize = 100_000;

/// Approximate token count of `text`.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    (text.len().div_ceil(CHARS_PER_TOKEN)) as u64
}

/// The largest char boundary ≤ `at`.
pub(crate) fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary ≥ `at`.
pub(crate) fn ceil_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Keeps the first `max_bytes` bytes (on a char boundary) and says what was
/// dropped.
pub(crate) fn truncate_with_note<'a>(text: &'a str, max_bytes: usize, why: &str) -> Cow<'a, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let cut = floor_char_boundary(text, max_bytes);
    Cow::Owned(format!(
        "{}\n\n[TRUNCATED: {} of {} characters shown ({why})]",
        &text[..cut],
        cut,
        text.len()
    ))
}

/// A tool result as stored on the `llm_tool_call` event and interactions.
pub(crate) fn truncate_for_storage(text: &str) -> Cow<'_, str> {
    truncate_with_note(text, STORAGE_MAX_TOKENS * CHARS_PER_TOKEN, "storage limit")
}

/// A tool result as given to the summarizer.
pub(crate) fn truncate_for_summarization(text: &str) -> Cow<'_, str> {
    truncate_with_note(
        text,
        SUMMARIZATION_INPUT_MAX_TOKENS * CHARS_PER_TOKEN,
        "summarization input limit",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }

    #[test]
    fn truncation_respects_char_boundaries_and_says_so() {
        let s = "é".repeat(10); // 20 bytes
        let t = truncate_with_note(&s, 5, "test");
        assert!(t.starts_with("éé"));
        assert!(
            t.contains("[TRUNCATED: 4 of 20 characters shown (test)]"),
            "{t}"
        );
        assert!(matches!(
            truncate_with_note("short", 100, "x"),
            Cow::Borrowed(_)
        ));
        let big = "x".repeat(STORAGE_MAX_TOKENS * CHARS_PER_TOKEN + 10);
        assert!(truncate_for_storage(&big).contains("storage limit"));
    }
}
