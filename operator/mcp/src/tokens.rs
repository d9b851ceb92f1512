//! Token estimation and truncation of tool results.
//!
//! Two independent limits: storage truncation protects the dashboard and the
//! database (timeline events, MCP interaction records); the summarization
//! limit is a safety net on what is sent to the summarizing model. Neither is
//! billing-accurate: about four characters per token is enough for
//! thresholds.

/// Characters per token assumed by [`estimate_tokens`].
pub const CHARS_PER_TOKEN: usize = 4;
/// Token budget of a stored tool result.
pub const STORAGE_MAX_TOKENS: usize = 8_000;
/// Token budget of the summarizer's input.
pub const SUMMARIZATION_MAX_TOKENS: usize = 100_000;

/// Approximate token count of `text` (characters / 4, rounded up).
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(CHARS_PER_TOKEN)
}

/// Truncates a tool result for storage (8,000 tokens).
pub fn truncate_for_storage(content: &str) -> String {
    truncate_to_tokens(content, STORAGE_MAX_TOKENS)
}

/// Truncates a tool result before it is summarized (100,000 tokens).
pub fn truncate_for_summarization(content: &str) -> String {
    truncate_to_tokens(content, SUMMARIZATION_MAX_TOKENS)
}

/// Keeps at most about `max_tokens` tokens of `content`, cutting on a line
/// break near the limit when there is one (a half line is harder to read), and
/// appends a notice saying how much was dropped. Content within the budget is
/// returned unchanged.
pub fn truncate_to_tokens(content: &str, max_tokens: usize) -> String {
    let max_chars = max_tokens.saturating_mul(CHARS_PER_TOKEN);
    let total_chars = content.chars().count();
    if total_chars <= max_chars {
        return content.to_owned();
    }
    // Byte offset of the character boundary at `max_chars`.
    let cut = content
        .char_indices()
        .nth(max_chars)
        .map(|(i, _)| i)
        .unwrap_or(content.len());
    let head = &content[..cut];
    // Prefer the last newline in the final tenth of the kept text.
    let min_keep = cut - cut / 10;
    let head = match head.rfind('\n') {
        Some(nl) if nl >= min_keep => &head[..nl],
        _ => head,
    };
    let kept_chars = head.chars().count();
    format!(
        "{head}\n\n[TRUNCATED: showing {kept_chars} of {total_chars} characters (~{} of ~{} tokens)]",
        kept_chars.div_ceil(CHARS_PER_TOKEN),
        total_chars.div_ceil(CHARS_PER_TOKEN),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_four_chars_per_token() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        // Characters, not bytes: multi-byte text is not overestimated.
        assert_eq!(estimate_tokens("ééééé"), 2);
    }

    #[test]
    fn small_content_is_untouched() {
        let s = "x".repeat(STORAGE_MAX_TOKENS * CHARS_PER_TOKEN);
        assert_eq!(truncate_for_storage(&s), s);
    }

    #[test]
    fn storage_truncation_bounds_size_and_says_so() {
        let s = "y".repeat(100_000);
        let t = truncate_for_storage(&s);
        assert!(t.starts_with(&"y".repeat(32_000)));
        assert!(!t.starts_with(&"y".repeat(32_001)));
        assert!(t.contains("[TRUNCATED: showing 32000 of 100000 characters"));
        assert!(estimate_tokens(&t) < STORAGE_MAX_TOKENS + 50);
    }

    #[test]
    fn cuts_on_a_line_break_near_the_limit() {
        let line = "0123456789abcdefghi\n"; // 20 chars
        let s = line.repeat(100); // 2000 chars
        let t = truncate_to_tokens(&s, 101); // 404 chars -> last full line ends at 400
        let kept = t.split("\n\n[TRUNCATED").next().unwrap();
        assert_eq!(kept.len(), 399);
        assert!(kept.ends_with("ghi"));
    }

    #[test]
    fn never_splits_a_multibyte_character() {
        let s = "é".repeat(50);
        let t = truncate_to_tokens(&s, 3);
        assert!(t.starts_with(&"é".repeat(12)));
        assert!(t.contains("of 50 characters"));
    }

    #[test]
    fn summarization_limit_is_larger() {
        let s = "z".repeat(500_000);
        assert!(truncate_for_summarization(&s).starts_with(&"z".repeat(400_000)));
        assert!(truncate_for_summarization(&s).contains("TRUNCATED"));
        assert!(truncate_for_storage(&s).len() < 33_000);
    }
}
