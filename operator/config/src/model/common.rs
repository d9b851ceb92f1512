//! Types several specs share: secret references, durations and the closed
//! vocabularies that only the configuration uses (the others are
//! `tarsy-core`'s).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CEL rule of every duration field: Go duration syntax (checked by regex
/// first, so a malformed value gets the rule's message rather than an
/// evaluation error) and strictly positive.
pub const DURATION_RULE: &str =
    "self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')";

/// What an agent does when one of its MCP servers cannot be used (it failed
/// to start or to list its tools): `continue` investigating with the tools
/// it has (the default; the timeline and the model are told) or `fail` the
/// execution at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum McpUnavailablePolicy {
    /// Investigate with the tools that are available.
    Continue,
    /// Fail the execution, naming the servers.
    Fail,
}

/// A key of a Kubernetes Secret in the resource's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub struct SecretKeyRef {
    /// Name of the Secret (same namespace as the referring resource).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A Go-style duration string (`120s`, `15m`, `1h30m`, `1.5h`) could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. \"120s\", \"15m\", \"1h30m\")")]
pub struct DurationError {
    /// The rejected text.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses a duration in the format Kubernetes and CEL's `duration()` use:
/// a sequence of decimal numbers, each with a unit (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), e.g. `120s`, `1h30m`, `1.5h`. Negative durations are rejected.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total_nanos: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(err("unknown unit")),
        };
        total_nanos += number * nanos_per_unit;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

/// Formats a duration the way [`parse_duration`] reads it (`2m0s` style is
/// avoided: the largest exact unit is used, e.g. `120s` → `2m`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    const UNITS: [(&str, u128); 6] = [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    for (unit, size) in UNITS {
        if nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{nanos}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("120s").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "15", "m", "15x", "-5s", "1h-5m", "1..5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn durations_format_round_trip() {
        for s in ["2m", "15m", "1h", "90s", "250ms"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    }
}
