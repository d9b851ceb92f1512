//! Small text helpers shared by the prompt, the injected section and the
//! tool results: clipping to a bound, one-line rendering, provenance words.

use tarsy_core::{MemoryCategory, MemoryValence};

/// `text` trimmed, at most `max` characters, marked with `…` when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", text[..i].trim_end()),
        None => text.to_string(),
    }
}

/// `text` trimmed, at most `max` characters; when cut, a line says how much
/// was left out (for prompt sections, where the model should know).
pub(crate) fn clip_noted(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => {
            let omitted = text[i..].chars().count();
            format!(
                "{}\n[… clipped: {omitted} more characters]",
                text[..i].trim_end()
            )
        }
        None => text.to_string(),
    }
}

/// Every run of whitespace (newlines included) as one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A confidence in [0, 1] (anything else is brought into it; NaN reads as 0).
pub(crate) fn unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// A confidence as shown: two decimals at most, trailing zeros dropped but
/// one kept (`0.8`, `0.75`, `1.0`).
pub(crate) fn confidence(x: f64) -> String {
    let s = format!("{:.2}", unit(x));
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// `learned today`, `learned 1 day ago`, `learned 12 days ago`.
pub(crate) fn learned(age_days: u32) -> String {
    match age_days {
        0 => "learned today".to_string(),
        1 => "learned 1 day ago".to_string(),
        n => format!("learned {n} days ago"),
    }
}

/// `today`, `1 day ago`, `12 days ago`.
pub(crate) fn ago(age_days: u32) -> String {
    match age_days {
        0 => "today".to_string(),
        1 => "1 day ago".to_string(),
        n => format!("{n} days ago"),
    }
}

/// A category read leniently: any case, surrounding spaces.
pub(crate) fn category(word: &str) -> Option<MemoryCategory> {
    let w = word.trim().to_ascii_lowercase();
    MemoryCategory::ALL
        .iter()
        .copied()
        .find(|c| c.as_str() == w)
}

/// A valence read leniently: any case, surrounding spaces, and the
/// adjectives a model reaches for (`helpful`, `misleading`).
pub(crate) fn valence(word: &str) -> Option<MemoryValence> {
    let w = word.trim().to_ascii_lowercase();
    match w.as_str() {
        "helpful" => Some(MemoryValence::Helped),
        "misleading" => Some(MemoryValence::Misled),
        _ => MemoryValence::ALL.iter().copied().find(|v| v.as_str() == w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_characters_not_bytes() {
        assert_eq!(clip("  short  ", 10), "short");
        assert_eq!(clip("ééééé", 3), "ééé…");
        assert_eq!(clip("abc def", 4), "abc…");
        assert_eq!(clip_noted("abcdef", 6), "abcdef");
        assert_eq!(
            clip_noted("abcdef", 2),
            "ab\n[… clipped: 4 more characters]"
        );
    }

    #[test]
    fn confidences_and_ages_read_naturally() {
        assert_eq!(confidence(0.8), "0.8");
        assert_eq!(confidence(0.75), "0.75");
        assert_eq!(confidence(1.0), "1.0");
        assert_eq!(confidence(0.0), "0.0");
        assert_eq!(confidence(7.0), "1.0");
        assert_eq!(confidence(f64::NAN), "0.0");
        assert_eq!(confidence(0.333), "0.33");
        assert_eq!(learned(0), "learned today");
        assert_eq!(learned(1), "learned 1 day ago");
        assert_eq!(learned(40), "learned 40 days ago");
        assert_eq!(ago(2), "2 days ago");
    }

    #[test]
    fn vocabulary_words_are_read_in_any_case() {
        assert_eq!(category(" Fact "), Some(MemoryCategory::Fact));
        assert_eq!(category("PROCEDURE"), Some(MemoryCategory::Procedure));
        assert_eq!(category("lesson"), None);
        assert_eq!(valence("Misled"), Some(MemoryValence::Misled));
        assert_eq!(valence("bad"), None);
        assert_eq!(valence("helpful"), Some(MemoryValence::Helped));
        assert_eq!(valence("Misleading"), Some(MemoryValence::Misled));
        assert_eq!(one_line(" a\n\n b\tc "), "a b c");
    }
}
