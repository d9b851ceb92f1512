//! Compiled regex patterns.

use std::borrow::Cow;

use regex::{Captures, Regex};

/// A regex pattern ready to apply.
#[derive(Debug)]
pub(crate) struct CompiledPattern {
    pub(crate) name: String,
    pub(crate) regex: Regex,
    pub(crate) replacement: String,
    /// Second look at a match the regex alone cannot judge (no look-around
    /// in the `regex` crate); `false` keeps the match as is.
    pub(crate) accept: Option<fn(&str) -> bool>,
    /// The replacement refers to capture groups (`$`), so matches must be
    /// resolved into groups, which is much slower than finding them.
    needs_captures: bool,
}

impl CompiledPattern {
    pub(crate) fn new(
        name: &str,
        regex: Regex,
        replacement: &str,
        accept: Option<fn(&str) -> bool>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            regex,
            replacement: replacement.to_owned(),
            accept,
            needs_captures: replacement.contains('$'),
        }
    }

    /// Applies the pattern; `None` when nothing was replaced.
    pub(crate) fn apply(&self, text: &str) -> Option<String> {
        if !self.needs_captures {
            // Literal replacement: only the (fast) match finder runs.
            return self.apply_literal(text);
        }
        let out = match self.accept {
            None => self.regex.replace_all(text, self.replacement.as_str()),
            Some(accept) => self.regex.replace_all(text, |caps: &Captures<'_>| {
                let whole = caps.get(0).map_or("", |m| m.as_str());
                if accept(whole) {
                    let mut dst = String::new();
                    caps.expand(&self.replacement, &mut dst);
                    dst
                } else {
                    whole.to_owned()
                }
            }),
        };
        match out {
            Cow::Owned(s) if s != text => Some(s),
            _ => None,
        }
    }

    fn apply_literal(&self, text: &str) -> Option<String> {
        let mut out: Option<String> = None;
        let mut copied = 0;
        for m in self.regex.find_iter(text) {
            if self.accept.is_some_and(|accept| !accept(m.as_str())) {
                continue;
            }
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buf.push_str(&text[copied..m.start()]);
            buf.push_str(&self.replacement);
            copied = m.end();
        }
        let mut buf = out?;
        buf.push_str(&text[copied..]);
        Some(buf)
    }
}

/// Acceptance test for `base64_secret`: random base64 mixes upper case,
/// lower case and digits; hex digests, identifiers and paths do not.
pub(crate) fn looks_like_base64_secret(candidate: &str) -> bool {
    let body = candidate.trim_end_matches('=');
    let (mut upper, mut lower, mut digit, mut slash) = (0usize, 0usize, 0usize, 0usize);
    for b in body.bytes() {
        match b {
            b'A'..=b'Z' => upper += 1,
            b'a'..=b'z' => lower += 1,
            b'0'..=b'9' => digit += 1,
            b'/' => slash += 1,
            _ => {}
        }
    }
    let all_hex = body.bytes().all(|b| b.is_ascii_hexdigit());
    let path_like = body.starts_with('/') || slash > body.len() / 16 + 1;
    upper > 0 && lower > 0 && digit > 0 && !all_hex && !path_like
}

/// Words that follow `secret:`, `token:` or `password:` in error messages
/// and status lines and are never the secret itself.
const PROSE_WORDS: &[&str] = &[
    "connection",
    "refused",
    "reset",
    "closed",
    "timeout",
    "timed",
    "denied",
    "forbidden",
    "unauthorized",
    "required",
    "missing",
    "invalid",
    "expired",
    "unavailable",
    "unknown",
    "error",
    "failed",
    "failure",
    "none",
    "null",
    "empty",
    "true",
    "false",
    "redacted",
    "hidden",
    "notfound",
    "not",
    "cannot",
    "could",
    "unable",
    "rejected",
];

/// Acceptance test for `key: value` patterns: leave values that are already
/// a `[MASKED_X]` marker (the structural masker's, say) alone, and keep the
/// sizes `kubectl describe secret` lists instead of values
/// (`password:  16 bytes`).
pub(crate) fn kv_value_is_secret(candidate: &str) -> bool {
    if candidate.contains("[MASKED_") {
        return false;
    }
    // Prose, not a value: "cannot read secret: connection refused".
    let value = candidate
        .rsplit([' ', '\t', ':', '='])
        .next()
        .unwrap_or("")
        .trim_matches(['"', '\'', '\\']);
    if PROSE_WORDS.contains(&value.to_ascii_lowercase().as_str()) {
        return false;
    }
    let Some(head) = candidate
        .strip_suffix(" bytes")
        .or_else(|| candidate.strip_suffix("\tbytes"))
    else {
        return true;
    };
    let value = head.rsplit([' ', '\t', ':', '=']).next().unwrap_or("");
    value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit())
}

/// Acceptance filter for a built-in pattern, by name.
pub(crate) fn builtin_filter(name: &str) -> Option<fn(&str) -> bool> {
    match name {
        "base64_secret" => Some(looks_like_base64_secret),
        "api_key" | "password" | "token" | "secret_key" | "aws_secret_key" => {
            Some(kv_value_is_secret)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_filter() {
        assert!(looks_like_base64_secret(
            "dGhpcyBpcyBhIHZlcnkgc2VjcmV0IHZhbHVlIGluZGVlZA=="
        ));
        assert!(!looks_like_base64_secret(
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        ));
        assert!(!looks_like_base64_secret(
            "/usr/local/lib/python3/site/packages/Foo1/bar"
        ));
        assert!(!looks_like_base64_secret(
            "AbstractSingletonProxyFactoryBeanDefinitionRegistry"
        ));
    }
}
